// Package runner is the protocol between the runtime and the runner, the
// small static program (cmd/slipway-runner) that runs inside every sandbox:
// its wire types, the server the runner runs (Serve) and the client the
// runtime uses (Client). Both sides import this package, so they agree by
// construction; ProtocolVersion numbers what they agree on.
//
// # Wire format
//
// The runner accepts connections on a unix socket. Each line either way is
// one JSON object. A client sends a Request ({"v":1,"op":...}); the runner
// answers with Frames:
//
//	identity  ->  {"type":"identity","identity":{runnerBinarySha256, generation, sandboxId, protocolVersion, ...}}
//	ping      ->  {"type":"pong","pong":{time, running, eventsRejected}}
//	exec      ->  {"type":"output","stream":"stdout"|"stderr","data":<base64>} ...
//	              ({"type":"event","event":{kind, at, data}} among them when the exec asked: events: true)
//	              then {"type":"exit","exit":{exitCode, signal, timedOut, cancelled, stop, truncated, outputBytes, durationMs, eventsRejected}}
//	anything  ->  {"type":"error","error":{code, message}} when refused
//
// Identity and ping may repeat on one connection; an exec takes its
// connection over and the runner closes it after the exit frame. Closing
// the connection (or sending {"op":"cancel"}) during an exec, or its
// timeoutMs passing, stops the command's process group: SIGTERM, then
// SIGKILL graceMs later (DefaultGraceMs when 0) unless the command exited
// meanwhile; the exit's stop says "terminated" or "killed". Output is streamed as it comes, at most
// ExecRequest.MaxOutput bytes of stdout and stderr together; the rest is
// counted and dropped and the exit says Truncated. A command that exits
// leaves its background processes running (they are the sandbox's), but
// the exec ends at most outputGrace after the command did.
//
// A client opens a connection per call, so a heartbeat runs beside a long
// exec, and a request that fails leaves nothing half-read behind. A
// heartbeat keeps one connection for its pings instead (Pinger): on
// Kubernetes each connection is a pod exec. A pinger may ask the runner's
// identity over its connection too, and be handed, connection open, to
// another client of that runner (Client.Keep), whose next Pinger it is: a
// warm member's identity proof's connection becomes its claim's
// heartbeat's.
//
// # The workload's events
//
// The runner also listens on an events socket (ListenEvents; its path in
// every command's $SLIPWAY_EVENTS, mode 0600: the workload's user). A
// workload writes one line there, {"kind":K,"data":{...}}, through
// `slipway-runner event K --data JSON`, and reads {"ok":true} or the reason
// it was refused. The kinds are model_request, first_output, tool_call,
// file, diff and status; output, state and the runner's payload_fetched
// cannot be forged. A line is at most MaxEventBytes, the data a JSON
// object; a sandbox reports at most EventRate a second (burst EventBurst),
// a command at most MaxEventsPerExec, over at most MaxEventConns
// connections at once; model_request and first_output stamp the run once
// each, in that order. The runner sets each event's time. A refusal is
// counted by reason in the command's exit (eventsRejected) and the ping.
//
// An exec that asks for them (ExecRequest.Events; a client whose stdout is
// an EventWriter) gets {"type":"event","event":{kind, at, data}} frames:
// payload_fetched (when the runner read the request) before the command
// starts, then the workload's events, each after every byte of output the
// command wrote before reporting it (the runner reads the command's pipes
// and frames what is left in them first). A runner that predates events
// ignores the field; a client that does not ask gets no event frame.
//
// # Identity
//
// The runner hashes its own executable through /proc/self/exe when it
// starts and reports that digest with the generation and sandbox it was
// started for. That is the runner's word; the sandbox backend checks it
// from the host as well (the hash of /proc/<pid>/exe of the process that
// answered). The runner makes itself non-dumpable (Harden), so a workload
// of the same uid cannot trace it or take its descriptors (the listening
// socket among them; a backend must not leave a copy with another process
// of the sandbox either). The workload can still signal it: a runner is no
// stronger a boundary than its sandbox.
//
// It is not the sandbox (package isolate and the backends make that), and
// it knows nothing of pools, claims or generations beyond echoing one.
package runner
