// Package templatemeta is what a workspace template image says about
// itself in its labels: the label names (LabelTests, LabelRefresh, ...)
// and the tests the template carries (Test, ParseTests), as a runtime
// reads them from a pinned template's config to prove a generation.
//
//	tests, err := templatemeta.ParseTests(cfg.Config.Labels[templatemeta.LabelTests])
//
// It is a contract package: it imports only the standard library, so that
// a reader of template images (the runtime) does not link the template
// builder. It does not build, parse template specs, scan or run anything:
// pkg/release/template builds templates and writes these labels.
package templatemeta
