package kubesandbox

// PathProofs is how many runners b proved on a claim's path (not taken
// from ProveWarm).
func PathProofs(b *Backend) int64 { return b.pathProofs.Load() }
