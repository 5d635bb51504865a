package argocd

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Parameter names, as the Application's spec.source.plugin.parameters
// gives them.
const (
	ParamPool       = "pool"
	ParamPolicy     = "policy"
	ParamAllowEmpty = "allow-empty"
)

// Env is what Argo CD tells the plugin about the application it renders.
type Env struct {
	AppName      string
	AppNamespace string
	// Revision is the commit checked out (ARGOCD_APP_REVISION): the
	// config revision stamped on every object.
	Revision   string
	SourcePath string
	RepoURL    string
	Params     Params
}

// Params are the plugin's parameters.
type Params struct {
	// Pool is the pool to render (required).
	Pool string
	// Policy is a repository-relative VerificationPolicy file used when
	// the tree holds no policies/verification.yaml.
	Policy string
	// AllowEmpty lets a pool render to nothing: only while it is being
	// removed.
	AllowEmpty bool
}

// notEnv matches what Argo CD replaces by '_' when it turns a parameter
// name into the tail of its PARAM_ variable (upper-cased after).
var notEnv = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// envName is prefix and name as Argo CD spells a variable: allow-empty is
// PARAM_ALLOW_EMPTY.
func envName(prefix, name string) string {
	return prefix + strings.ToUpper(notEnv.ReplaceAllString(name, "_"))
}

// announced is one entry of ARGOCD_APP_PARAMETERS.
type announced struct {
	Name   string            `json:"name"`
	String *string           `json:"string,omitempty"`
	Array  []string          `json:"array,omitempty"`
	Map    map[string]string `json:"map,omitempty"`
}

// ReadEnv reads the plugin's environment through getenv (os.Getenv in the
// CLI). A parameter is read from ARGOCD_APP_PARAMETERS when Argo CD sets
// it, else from PARAM_<NAME>, else from the Application's env
// ARGOCD_ENV_<NAME>; a parameter and an env entry that disagree are an
// error, as is an unknown parameter.
func ReadEnv(getenv func(string) string) (*Env, error) {
	e := &Env{
		AppName:      getenv("ARGOCD_APP_NAME"),
		AppNamespace: getenv("ARGOCD_APP_NAMESPACE"),
		Revision:     getenv("ARGOCD_APP_REVISION"),
		SourcePath:   getenv("ARGOCD_APP_SOURCE_PATH"),
		RepoURL:      getenv("ARGOCD_APP_SOURCE_REPO_URL"),
	}
	params := map[string]string{}
	if raw := getenv("ARGOCD_APP_PARAMETERS"); raw != "" {
		var list []announced
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&list); err != nil {
			return nil, fmt.Errorf("argocd: ARGOCD_APP_PARAMETERS: %w", err)
		}
		for _, p := range list {
			switch {
			case p.Name != ParamPool && p.Name != ParamPolicy && p.Name != ParamAllowEmpty:
				return nil, fmt.Errorf("argocd: ARGOCD_APP_PARAMETERS: unknown parameter %q (want %s, %s or %s)", p.Name, ParamPool, ParamPolicy, ParamAllowEmpty)
			case p.String == nil || p.Array != nil || p.Map != nil:
				return nil, fmt.Errorf("argocd: ARGOCD_APP_PARAMETERS: parameter %s: want a string", p.Name)
			}
			params[p.Name] = *p.String
		}
	}
	get := func(name string) (string, error) {
		v, ok := params[name]
		if !ok {
			v = getenv(envName("PARAM_", name))
		}
		env := getenv(envName("ARGOCD_ENV_", name))
		switch {
		case v == "":
			return env, nil
		case env != "" && env != v:
			return "", fmt.Errorf("argocd: parameter %s is %q but the Application's env %s is %q", name, v, envName("ARGOCD_ENV_", name), env)
		}
		return v, nil
	}
	var err error
	if e.Params.Pool, err = get(ParamPool); err != nil {
		return nil, err
	}
	if e.Params.Policy, err = get(ParamPolicy); err != nil {
		return nil, err
	}
	ae, err := get(ParamAllowEmpty)
	if err != nil {
		return nil, err
	}
	if ae != "" {
		if e.Params.AllowEmpty, err = strconv.ParseBool(ae); err != nil {
			return nil, fmt.Errorf("argocd: parameter %s: %q is not true or false", ParamAllowEmpty, ae)
		}
	}
	if e.Params.Pool == "" {
		return nil, fmt.Errorf("argocd: no pool: set the plugin parameter %s (PARAM_%s)", ParamPool, strings.ToUpper(ParamPool))
	}
	if e.Revision == "" {
		return nil, fmt.Errorf("argocd: ARGOCD_APP_REVISION is not set: the config revision to stamp is unknown")
	}
	return e, nil
}
