// Package shape is what every sandbox of a workspace template sees beyond
// the template's own files, made in one place so that it is the same
// wherever a template runs: the local sandbox backend (package
// sandbox/local) gives it to every sandbox, and the template build
// (package template) gives it to the sandbox its tests run in, so a test
// means the same at build time and in a sandbox.
//
// The shape, over a template unpacked in a directory and mounted read-only
// as /:
//
//   - the refresh phase (Refresh): per-clone values the frozen template
//     must not carry, made fresh and mounted read-only over the template's
//     files: always a new /etc/machine-id (and /var/lib/dbus/machine-id
//     when the template has one); a new /var/lib/systemd/random-seed and
//     new ssh host keys when the template's refresh list asks; in a pod
//     on Kubernetes (RefreshPod, run by the pod's init container, which
//     cannot see the template's files) only the new /etc/machine-id;
//   - a private writable workspace at the working directory (Workdir),
//     seeded from the template's own copy of it (SeedWorkspace);
//   - the environment (Env): the image's, with PATH and HOME defaults.
//
// MountPoints adds to an unpacked tree the empty mount points a read-only
// root needs for these mounts.
//
// It is not a sandbox: running things (package isolate), the runner, the
// state directory and credentials belong to the callers.
package shape
