package runnermeta

// Labels of the runner image's config.
const (
	// LabelSHA256 is the hex sha256 of the runner binary.
	LabelSHA256 = "dev.slipway.runner.sha256"
	// LabelProtocol is the runner protocol version the binary speaks,
	// checked against a generation's compatibility.runnerProtocol range.
	LabelProtocol = "dev.slipway.runner.protocol"
)
