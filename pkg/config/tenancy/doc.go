// Package tenancy defines what the config repository says about the control
// plane's tenants, reviewed like code:
//
//	tenants/<name>.yaml    kind: Tenant   pools and profiles the tenant may use,
//	                                      concurrency, queue bound, budget per period,
//	                                      destinations (webhooks its job events are
//	                                      delivered to: URL, kinds, requiresResult,
//	                                      secretRef {file|env}, ratePerSecond,
//	                                      maxAttempts)
//	profiles/<name>.yaml   kind: Profile  a capability profile: network, maximum
//	                                      duration and output, secret versions,
//	                                      pools and templates
//	pricing.yaml           kind: Pricing  rates per pool class and state: active
//	                                      (required), warm (idle) and retained per
//	                                      hour, storage per GiB-hour (each optional:
//	                                      left out, that term is unknown); pools to
//	                                      classes
//
// Each document parses strictly (unknown fields, a second document, a
// name other than the file's refused) and errors wrap ErrInvalid naming the
// file and line. FromTree reads one revision's documents as a whole Config
// and checks that every profile a tenant names exists; Load does it for a
// branch's head. Every document comes as a Versioned value with its path,
// revision and digest, which a job records; ProfileAt reads a profile back
// as it was at that revision, after it changed or was deleted, and
// Config.ProfileChange says whether it has changed or been deleted since.
// Authorize says whether a tenant may use a profile on a pool (ErrNotFound,
// ErrForbidden); Pricing.Rate gives a pool's rates or says its price is
// unknown (never zero), WorstCase a job's highest cost, Budget.PeriodStart
// where the current budget period began.
//
// It is not the control plane: it holds no job, token, spend or database,
// and serves nothing; package control uses it to admit jobs.
package tenancy
