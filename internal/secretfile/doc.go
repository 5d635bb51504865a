// Package secretfile reads the small files a server is given its secrets
// in (a database's DSN, an API token, a git token) and says, when one is
// not there, where it should have come from.
//
// In a pod those files are keys of a Secret mounted as a volume. When the
// volume is optional and the Secret does not exist yet, the kubelet starts
// the container with an empty directory and fills it once the Secret is
// created; a server that reads its file again until it exists becomes
// ready by itself, instead of a pod stuck in CreateContainerConfigError.
// Mounts is what the manifest tells the process about those volumes
// ($SLIPWAY_SECRET_MOUNTS, DIR=SECRET,...), so that the one log line a
// missing file makes names the Secret to create and its key.
//
// It never puts a file's content in an error. It is not a secret store:
// it reads files, nothing else.
package secretfile
