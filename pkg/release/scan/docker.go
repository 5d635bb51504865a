package scan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
)

// dockerConfigFile reports whether a base name is a container registry
// credentials file: docker's config.json (anywhere: the .docker directory is
// often elsewhere through DOCKER_CONFIG), podman's auth.json, and the legacy
// .dockercfg.
func dockerConfigFile(name string) bool {
	return name == "config.json" || name == "auth.json" || name == ".dockercfg"
}

// dockerSecretField reports the credential fields of an auths entry.
func dockerSecretField(k string) bool {
	return k == "auth" || k == "identitytoken" || k == "registrytoken" || k == "password"
}

// reRegistry is what a registry key must look like to be named in a detail.
var reRegistry = regexp.MustCompile(`^[A-Za-z0-9._:/-]{1,100}$`)

// maxJSONDepth bounds the nesting the docker rule follows.
const maxJSONDepth = 32

var errJSONDepth = errors.New("json nested too deeply")

// checkDockerConfig reports every non-empty credential under auths.<registry>
// (or, for .dockercfg, <registry>) of the JSON in b. A file that is not JSON
// gives no finding.
func checkDockerConfig(p string, b []byte, legacy bool, values *[][]byte) []Finding {
	var out []Finding
	dec := json.NewDecoder(bytes.NewReader(b))
	_ = walkJSON(dec, nil, func(path []string, v string, off int64) {
		var reg, field string
		switch {
		case len(path) == 3 && path[0] == "auths":
			reg, field = path[1], path[2]
		case legacy && len(path) == 2:
			reg, field = path[0], path[1]
		default:
			return
		}
		if v == "" || redactedValue(v) || !dockerSecretField(field) {
			return
		}
		if !reRegistry.MatchString(reg) {
			reg = "(unnamed)"
		}
		line := 1 + bytes.Count(b[:min(off, int64(len(b)))], []byte{'\n'})
		out = append(out, Finding{Rule: RuleDockerAuth, Path: p, Line: line,
			Detail: fmt.Sprintf("%s for registry %s is set (%d chars)", field, reg, len(v))})
		if values != nil {
			*values = append(*values, []byte(v))
		}
	})
	return out
}

// walkJSON calls fn with the key path, value and end offset of every string
// value of the next JSON value in dec.
func walkJSON(dec *json.Decoder, path []string, fn func([]string, string, int64)) error {
	if len(path) > maxJSONDepth {
		return errJSONDepth
	}
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := t.(type) {
	case json.Delim:
		if v != '{' && v != '[' {
			return fmt.Errorf("unexpected %v", v)
		}
		for dec.More() {
			key := "[]"
			if v == '{' {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ = kt.(string)
			}
			if err := walkJSON(dec, append(path[:len(path):len(path)], key), fn); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	case string:
		fn(path, v, dec.InputOffset())
	}
	return nil
}
