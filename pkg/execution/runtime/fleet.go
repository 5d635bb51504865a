package runtime

// The runtime's control-plane protocol: the version of what it
// understands of generations. A generation's compatibility names the
// control-plane protocol versions that understand it.
const (
	ControlPlaneProtocol    = 1
	MinControlPlaneProtocol = 1
)
