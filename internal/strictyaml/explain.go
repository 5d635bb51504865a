package strictyaml

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/slipway-dev/slipway/internal/spelling"
)

var (
	unknownField = regexp.MustCompile(`^field (\S+) not found in type (.+)$`)
	wrongType    = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `.*`)? into (.+)$")
)

// explain rewrites yaml.v3's messages about v's Go types in the words of
// the YAML: an unknown field with the nearest valid name ("unknown field
// \"bsae\" (did you mean \"base\"?)"), a wrong type as what was wanted. A
// message it does not know is kept.
func explain(msg string, v any) string {
	if m := unknownField.FindStringSubmatch(msg); m != nil {
		out := fmt.Sprintf("unknown field %q", m[1])
		names := fieldNames(reflect.TypeOf(v), m[2])
		if s := nearest(m[1], names); s != "" {
			return out + fmt.Sprintf(" (did you mean %q?)", s)
		}
		if len(names) > 0 && len(names) <= 12 {
			return out + " (the fields here: " + strings.Join(names, ", ") + ")"
		}
		return out
	}
	if m := wrongType.FindStringSubmatch(msg); m != nil {
		// The value is not repeated: it may be a secret written in the
		// wrong place; the line says where.
		return fmt.Sprintf("got %s, want %s", yamlWord(m[1]), goWord(m[2]))
	}
	return msg
}

// yamlWord names a YAML tag.
func yamlWord(tag string) string {
	switch tag {
	case "str":
		return "a string"
	case "int", "float":
		return "a number"
	case "bool":
		return "true or false"
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	case "null":
		return "empty"
	}
	return "a " + tag
}

// goWord names what a Go type wants, in YAML's words.
func goWord(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || strings.HasPrefix(t, "float"):
		return "a number"
	case t == "time.Duration":
		return "a duration (30s, 5m)"
	}
	return "a mapping"
}

// fieldNames are the YAML names of the struct type called name ("pkg.Type",
// as reflect prints it) reachable from t, sorted.
func fieldNames(t reflect.Type, name string) []string {
	seen := map[reflect.Type]bool{}
	var found reflect.Type
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct || seen[t] || found != nil {
			return
		}
		seen[t] = true
		if t.String() == name {
			found = t
			return
		}
		for i := range t.NumField() {
			walk(t.Field(i).Type)
		}
	}
	walk(t)
	if found == nil {
		return nil
	}
	var names []string
	var collect func(t reflect.Type)
	collect = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("yaml")
			n, opts, _ := strings.Cut(tag, ",")
			switch {
			case n == "-":
				continue
			case strings.Contains(opts, "inline"):
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					collect(ft)
				}
				continue
			case !f.IsExported():
				continue
			case n == "":
				n = strings.ToLower(f.Name)
			}
			names = append(names, n)
		}
	}
	collect(found)
	sort.Strings(names)
	return names
}

// nearest is the name closest to s, when one is close enough to be a slip:
// at most 2 edits (1 for names of up to 4 letters), or a difference of case.
func nearest(s string, names []string) string {
	best, bestD := "", 3
	if len(s) <= 4 {
		bestD = 2
	}
	for _, n := range names {
		if strings.EqualFold(n, s) {
			return n
		}
		if d := spelling.Distance(strings.ToLower(s), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}
