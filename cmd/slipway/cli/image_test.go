package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestImageFromDirLabels: --label sets config labels on the pushed image (as
// crane mutate --label does); a label that is not KEY=VALUE is a usage error
// and nothing is pushed.
func TestImageFromDirLabels(t *testing.T) {
	_, host, _ := registryWith(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", "image", "from-dir", dir, "--push", host+"/labelled", "--label", "org.example.team=agents", "--label", "empty=")
	if r.code != 0 {
		t.Fatalf("image from-dir --label: %+v", r)
	}
	ref, err := name.ParseReference(strings.TrimSpace(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Labels; got["org.example.team"] != "agents" || len(got) != 2 {
		t.Errorf("labels %v", got)
	}
	r = run(t, "", "image", "from-dir", dir, "--push", host+"/refused", "--label", "nokey")
	if r.code != exitUsage || !strings.Contains(r.stderr, `--label "nokey": want KEY=VALUE`) {
		t.Errorf("a label without =: %+v", r)
	}
	refused, err := name.ParseReference(host + "/refused:latest")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(refused); err == nil {
		t.Error("an image was pushed for a refused label")
	}
}
