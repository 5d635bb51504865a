package local

// Extractions is how many times b unpacked a template.
func Extractions(b *Backend) int64 { return b.extractions.Load() }

// LabelTemplateRefresh is the template label the refresh phase reads.
const LabelTemplateRefresh = labelTemplateRefresh

// RefreshKinds are the refresh kinds this package knows.
func RefreshKinds() []string {
	return []string{refreshMachineID, refreshSSHHostKeys, refreshRandomSeed}
}
