package validate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tektoncd/pipeline/pkg/apis/config"
	v1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"knative.dev/pkg/apis"
	"sigs.k8s.io/yaml"
)

// Context returns a context as Tekton's admission webhook builds it for a
// create: the config store's defaults and the default feature flags (an
// empty feature-flags ConfigMap), within a create.
func Context(ctx context.Context) (context.Context, error) {
	flags, err := config.NewFeatureFlagsFromMap(map[string]string{})
	if err != nil {
		return nil, err
	}
	defaults, err := config.NewDefaultsFromMap(map[string]string{})
	if err != nil {
		return nil, err
	}
	cfg := config.FromContextOrDefaults(ctx)
	cfg.FeatureFlags, cfg.Defaults = flags, defaults
	return apis.WithinCreate(config.ToContext(ctx, cfg)), nil
}

// DecodeTask decodes one Task document strictly: an unknown or misspelt
// field is an error naming the file.
func DecodeTask(file string, data []byte) (*v1.Task, error) {
	var t v1.Task
	if err := yaml.UnmarshalStrict(data, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if t.APIVersion != "tekton.dev/v1" || t.Kind != "Task" {
		return nil, fmt.Errorf("%s: %s %s, want tekton.dev/v1 Task", file, t.APIVersion, t.Kind)
	}
	return &t, nil
}

// DecodePipeline decodes one Pipeline document strictly.
func DecodePipeline(file string, data []byte) (*v1.Pipeline, error) {
	var p v1.Pipeline
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if p.APIVersion != "tekton.dev/v1" || p.Kind != "Pipeline" {
		return nil, fmt.Errorf("%s: %s %s, want tekton.dev/v1 Pipeline", file, p.APIVersion, p.Kind)
	}
	return &p, nil
}

// CheckTask decodes, defaults and validates a Task as the webhook would.
func CheckTask(ctx context.Context, file string, data []byte) (*v1.Task, error) {
	t, err := DecodeTask(file, data)
	if err != nil {
		return nil, err
	}
	t.SetDefaults(ctx)
	if ferr := t.Validate(ctx); ferr != nil {
		return nil, fmt.Errorf("%s: %w", file, ferr)
	}
	return t, nil
}

// CheckPipeline decodes, defaults and validates a Pipeline as the webhook
// would.
func CheckPipeline(ctx context.Context, file string, data []byte) (*v1.Pipeline, error) {
	p, err := DecodePipeline(file, data)
	if err != nil {
		return nil, err
	}
	p.SetDefaults(ctx)
	if ferr := p.Validate(ctx); ferr != nil {
		return nil, fmt.Errorf("%s: %w", file, ferr)
	}
	return p, nil
}

// LoadTask reads and checks one Task file.
func LoadTask(ctx context.Context, file string) (*v1.Task, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return CheckTask(ctx, filepath.Base(file), data)
}
