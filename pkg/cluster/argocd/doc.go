// Package argocd is Slipway's side of Argo CD: the config management
// plugin's generate and parameters commands, and the ApplicationSet
// plugin generator.
//
// Generate renders one pool from a checked-out config repository (Argo
// CD's CMP v2 contract: the working directory is the application's source
// path, the repository root is found by walking up to the folder holding
// pools/, the revision is ARGOCD_APP_REVISION, parameters come as
// ARGOCD_APP_PARAMETERS and PARAM_<NAME>, the Application's env as
// ARGOCD_ENV_<NAME>) through package render, which verifies every
// generation against the tree's policies/verification.yaml before
// anything is printed. Locate also knows the layout Argo CD's
// manifest-generate-paths gives: the pool's folder alone at the top of the
// checkout, read in place as pools/<pool> (render.OpenPoolDir). An
// operator's policy (OperatorPolicy, the sidecar's
// SLIPWAY_ARGOCD_POLICY_FILE) wins over anything in the checkout, and is
// required for a pool's folder alone. An empty render is an error unless the parameter
// allow-empty says the pool is being removed. The output is a pure
// function of the tree and the parameters: Argo CD caches it keyed on both.
//
// Announce lists the parameters for Argo CD's UI (the ParameterAnnouncement
// format). Generator answers the ApplicationSet plugin generator protocol
// (POST /api/v1/getparams.execute with a bearer token): one parameter set
// per pool at the config repository's head. Application is a rollout's
// Applier (package kubefleet) when Argo CD applies: it reads which config
// revision an Application reports synced and healthy (ErrNotYet until
// then) through the dynamic client.
//
// It applies nothing to a cluster itself: Argo CD applies what Generate
// prints. It imports nothing of Argo CD: its protocols are plain environment
// variables and JSON. The tests against Argo CD's own CMP server and
// client live in the nested module integrations/argocd.
package argocd
