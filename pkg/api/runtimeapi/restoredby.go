package runtimeapi

// What proved a restore: a RestoreRecord's By, and what a ResumeBody's By
// may ask to be recorded.
const (
	// RestoredByResume: an owner resumed its suspended run (the default).
	RestoredByResume = "resume"
	// RestoredByCanary: a canary round suspended and resumed its own
	// claim to prove that a checkpoint of the pool restores.
	RestoredByCanary = "canary"
	// RestoredByTest: a test restored the checkpoint.
	RestoredByTest = "test"
	// RestoredByDrain: a rollout's drain deadline (onDrainDeadline:
	// checkpoint) moved the run onto the new generation; the runtime
	// records it, a client cannot ask for it.
	RestoredByDrain = "drain"
)
