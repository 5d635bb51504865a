package pin

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "rewrite", "custom", "pinconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Fields: []FieldSpec{
			{Kind: "Pipeline", Path: "spec.steps[].image"},
			{APIVersion: "workflows.example.com/v1", Kind: "Pipeline", Path: "spec.tools[]"},
		},
		PodSpecs: []FieldSpec{
			{APIVersion: "extensions.agents.x-k8s.io/v1alpha1", Kind: "SandboxTemplate", Path: "spec.podTemplate.spec"},
			{Kind: "Sandbox", Path: "spec.podTemplate.spec"},
		},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
}

func TestLoadConfigRefuses(t *testing.T) {
	head := "apiVersion: slipway.dev/v1alpha1\nkind: PinConfig\n"
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown top field", head + "feilds: []\n", "c.yaml:3:1: invalid pin config: PinConfig: unknown field \"feilds\""},
		{"unknown entry field", head + "fields:\n- kind: X\n  path: a\n  pth: b\n", "c.yaml:6:3: invalid pin config: fields[0]: unknown field \"pth\""},
		{"repeated field", head + "kind: PinConfig\n", "c.yaml:3:1: invalid pin config: PinConfig: field \"kind\" repeated"},
		{"wrong kind", "apiVersion: slipway.dev/v1alpha1\nkind: Config\n", "c.yaml:2:7: invalid pin config: kind \"Config\", want PinConfig"},
		{"wrong apiVersion", "apiVersion: v1\nkind: PinConfig\n", "c.yaml:1:13: invalid pin config: apiVersion \"v1\""},
		{"missing kind", "apiVersion: slipway.dev/v1alpha1\n", "c.yaml:1:1: invalid pin config: apiVersion slipway.dev/v1alpha1 and kind PinConfig are required"},
		{"bad path", head + "podSpecs:\n- kind: X\n  path: spec..a\n", "c.yaml:5:9: invalid pin config: podSpecs[0]: path \"spec..a\": bad element \"\""},
		{"bracket inside key", head + "fields:\n- kind: X\n  path: a[0].b\n", "c.yaml:5:9: invalid pin config: fields[0]: path \"a[0].b\""},
		{"no path", head + "fields:\n- kind: X\n", "c.yaml:4:3: invalid pin config: fields[0]: kind and path are required"},
		{"not a list", head + "fields: {kind: X}\n", "c.yaml:3:9: invalid pin config: fields is not a list"},
		{"not a string", head + "fields:\n- kind: [X]\n  path: a\n", "c.yaml:4:9: invalid pin config: fields[0].kind is not a string"},
		{"alias", head + "fields:\n- &e {kind: X, path: a}\npodSpecs: [*e]\n", "invalid pin config"},
		{"two documents", head + "---\n" + head, "c.yaml:3: invalid pin config: more than one document"},
		{"syntax", head + "fields: [\n", "c.yaml:3: input refused: invalid yaml"},
		{"empty", "", "c.yaml: invalid pin config: empty file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"c.yaml": tc.yaml})
			_, err := LoadConfig(filepath.Join(dir, "c.yaml"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
		})
	}
	if err := (Config{Fields: []FieldSpec{{Path: "a"}}}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("validate without kind: %v", err)
	}
	if _, err := Find(t.Context(), []string{"testdata"}, WithConfig(Config{PodSpecs: []FieldSpec{{Kind: "X", Path: "a[]b"}}})); !errors.Is(err, ErrConfig) {
		t.Errorf("WithConfig with a bad path: %v", err)
	}
}
