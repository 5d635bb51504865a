package sbom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anchore/syft/syft/format"
	"github.com/anchore/syft/syft/format/cyclonedxjson"
	"github.com/anchore/syft/syft/format/spdxjson"

	"github.com/slipway-dev/slipway/pkg/api/sbomdoc"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

var testCreated = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// fixtureRoot writes the fixture tree plus the tiny Go binary into a new directory.
func fixtureRoot(t *testing.T) string {
	t.Helper()
	root := writeFixture(t)
	copyFile(t, buildTiny(t, t.TempDir()), filepath.Join(root, "usr/local/bin/tiny"), 0o755)
	return root
}

// TestGenerateFixture checks the package set found in the fixture against testdata/fixture.golden
// and that the documents carry no host path.
func TestGenerateFixture(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	s, err := Generate(context.Background(), root, WithDocumentName("fixture"), WithCreated(testCreated))
	if err != nil {
		t.Fatal(err)
	}
	got := packageLines(s.Packages(), runtime.Version())
	golden := filepath.Join("testdata", "fixture.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("packages differ from %s (run with -update to accept):\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
	if !slices.IsSortedFunc(s.Packages(), sbomdoc.Compare) {
		t.Error("Packages() is not sorted")
	}
	for _, doc := range [][]byte{s.SPDXJSON(), s.CycloneDXJSON()} {
		if bytes.Contains(doc, []byte(root)) || bytes.Contains(doc, []byte(os.TempDir())) {
			t.Errorf("document names a host path (%s)", root)
		}
	}
}

// TestDeterministic generates the same tree at two paths, serially and with four workers, without
// and with Prepare, and expects the same bytes.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	tiny := buildTiny(t, t.TempDir())
	pctx, err := Prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var docs [2][2][]byte
	for i, c := range []struct {
		ctx context.Context
		par int
	}{{context.Background(), 1}, {pctx, 4}} {
		root := writeFixture(t)
		copyFile(t, tiny, filepath.Join(root, "usr/local/bin/tiny"), 0o755)
		s, err := Generate(c.ctx, root, WithCreated(testCreated), WithParallelism(c.par))
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = [2][]byte{s.SPDXJSON(), s.CycloneDXJSON()}
	}
	if !bytes.Equal(docs[0][0], docs[1][0]) {
		t.Errorf("spdx differs between runs:\n%s\n%s", firstDiff(docs[0][0], docs[1][0]), "")
	}
	if !bytes.Equal(docs[0][1], docs[1][1]) {
		t.Errorf("cyclonedx differs between runs:\n%s", firstDiff(docs[0][1], docs[1][1]))
	}
}

// firstDiff shows the bytes around the first difference of a and b.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-80)
	return string(a[lo:min(len(a), i+80)]) + "\n---\n" + string(b[lo:min(len(b), i+80)])
}

// TestDocumentsValid parses both documents back with syft's decoders and with encoding/json, and
// checks the fields SPDX 2.3 and CycloneDX require.
func TestDocumentsValid(t *testing.T) {
	t.Parallel()
	root := writeFixture(t)
	const ns = "https://example.com/spdx/template-abc"
	s, err := Generate(context.Background(), root, WithDocumentName("minimal"), WithNamespace(ns), WithCreated(testCreated))
	if err != nil {
		t.Fatal(err)
	}

	var doc struct {
		SPDXVersion       string `json:"spdxVersion"`
		DataLicense       string `json:"dataLicense"`
		SPDXID            string `json:"SPDXID"`
		Name              string `json:"name"`
		DocumentNamespace string `json:"documentNamespace"`
		CreationInfo      struct {
			Created  string   `json:"created"`
			Creators []string `json:"creators"`
		} `json:"creationInfo"`
		Packages []struct {
			SPDXID           string `json:"SPDXID"`
			Name             string `json:"name"`
			DownloadLocation string `json:"downloadLocation"`
			ExternalRefs     []struct {
				Type    string `json:"referenceType"`
				Locator string `json:"referenceLocator"`
			} `json:"externalRefs"`
		} `json:"packages"`
		Files []struct {
			SPDXID string `json:"SPDXID"`
		} `json:"files"`
		Relationships []struct {
			A    string `json:"spdxElementId"`
			Type string `json:"relationshipType"`
			B    string `json:"relatedSpdxElement"`
		} `json:"relationships"`
	}
	if err := json.Unmarshal(s.SPDXJSON(), &doc); err != nil {
		t.Fatalf("spdx is not json: %v", err)
	}
	switch {
	case doc.SPDXVersion != "SPDX-2.3", doc.DataLicense != "CC0-1.0", doc.SPDXID != "SPDXRef-DOCUMENT":
		t.Errorf("spdx header: %q %q %q", doc.SPDXVersion, doc.DataLicense, doc.SPDXID)
	case doc.Name != "minimal", doc.DocumentNamespace != ns:
		t.Errorf("spdx name %q namespace %q", doc.Name, doc.DocumentNamespace)
	case doc.CreationInfo.Created != "2024-05-01T12:00:00Z":
		t.Errorf("spdx created %q", doc.CreationInfo.Created)
	case !slices.Contains(doc.CreationInfo.Creators, "Tool: syft-"+SyftVersion):
		t.Errorf("spdx creators %q", doc.CreationInfo.Creators)
	}
	ids := map[string]bool{"SPDXRef-DOCUMENT": true}
	var purls []string
	for _, p := range doc.Packages {
		if p.SPDXID == "" || p.Name == "" || p.DownloadLocation == "" {
			t.Errorf("spdx package lacks a required field: %+v", p)
		}
		ids[p.SPDXID] = true
		for _, r := range p.ExternalRefs {
			if r.Type == "purl" {
				purls = append(purls, r.Locator)
			}
		}
	}
	for _, f := range doc.Files {
		ids[f.SPDXID] = true
	}
	for _, r := range doc.Relationships {
		if !ids[r.A] || !ids[r.B] {
			t.Errorf("relationship %s %s %s names an element not in the document", r.A, r.Type, r.B)
		}
	}
	var want []string
	for _, p := range s.Packages() {
		want = append(want, p.PURL)
	}
	slices.Sort(purls)
	slices.Sort(want)
	if !slices.Equal(purls, want) {
		t.Errorf("spdx purls %q, Packages() %q", purls, want)
	}

	// syft's own decoders recognise both documents and read the same packages back
	for _, c := range []struct {
		doc     []byte
		id      string
		version string
	}{
		{s.SPDXJSON(), string(spdxjson.ID), "2.3"},
		{s.CycloneDXJSON(), string(cyclonedxjson.ID), CycloneDXVersion},
	} {
		decoded, id, version, err := format.Decode(bytes.NewReader(c.doc))
		if err != nil {
			t.Fatalf("decode %s: %v", c.id, err)
		}
		if string(id) != c.id || version != c.version {
			t.Errorf("decoded as %s %s, want %s %s", id, version, c.id, c.version)
		}
		var got []string
		for p := range decoded.Artifacts.Packages.Enumerate() {
			got = append(got, p.PURL)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s decodes to purls %q, want %q", c.id, got, want)
		}
	}

	var bom struct {
		BOMFormat    string `json:"bomFormat"`
		SpecVersion  string `json:"specVersion"`
		SerialNumber string `json:"serialNumber"`
		Metadata     struct {
			Timestamp string `json:"timestamp"`
			Component struct {
				Name string `json:"name"`
			} `json:"component"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(s.CycloneDXJSON(), &bom); err != nil {
		t.Fatalf("cyclonedx is not json: %v", err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != CycloneDXVersion ||
		!strings.HasPrefix(bom.SerialNumber, "urn:uuid:") || bom.Metadata.Timestamp != "2024-05-01T12:00:00Z" ||
		bom.Metadata.Component.Name != "minimal" {
		t.Errorf("cyclonedx header: %+v", bom)
	}
}

// TestDerivedNamespace: without WithNamespace the namespace comes from the content, so a different
// tree gets a different one and the same tree the same.
func TestDerivedNamespace(t *testing.T) {
	t.Parallel()
	pctx, err := Prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ns := func(root string) string {
		s, err := Generate(pctx, root, WithCatalogers("dpkg-db-cataloger"))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Namespace string `json:"documentNamespace"`
		}
		if err := json.Unmarshal(s.SPDXJSON(), &doc); err != nil {
			t.Fatal(err)
		}
		if u, err := url.Parse(doc.Namespace); err != nil || !u.IsAbs() || u.Fragment != "" {
			t.Errorf("namespace %q is not an absolute uri without a fragment", doc.Namespace)
		}
		return doc.Namespace
	}
	a := writeFixture(t)
	first := ns(a)
	if again := ns(writeFixture(t)); again != first {
		t.Errorf("same tree, namespaces %q and %q", first, again)
	}
	status := filepath.Join(a, "var/lib/dpkg/status")
	b, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(status, bytes.ReplaceAll(b, []byte("3.0.7-1"), []byte("3.0.8-1")), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed := ns(a); changed == first {
		t.Errorf("different package versions, same namespace %q", first)
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	s, err := Generate(context.Background(), writeFixture(t), WithCatalogers("dpkg-db-cataloger"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	for _, want := range []Change{Created, Unchanged} {
		written, err := s.Write(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(written) != 2 {
			t.Fatalf("wrote %d files, want 2", len(written))
		}
		for i, w := range written {
			if w.Change != want || !strings.HasPrefix(w.Digest, "sha256:") {
				t.Errorf("write %s: %+v, want %s", w.Path, w, want)
			}
			body, err := os.ReadFile(w.Path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(body, [][]byte{s.SPDXJSON(), s.CycloneDXJSON()}[i]) {
				t.Errorf("%s holds other bytes", w.Path)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, SPDXFileName), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	written, err := s.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if written[0].Change != Updated || written[1].Change != Unchanged {
		t.Errorf("after editing the spdx file: %+v", written)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	root := writeFixture(t)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		root string
		opts []Option
		want error
	}{
		{"missing root", ctx, filepath.Join(root, "nope"), nil, ErrInvalidRoot},
		{"empty root", ctx, "", nil, ErrInvalidRoot},
		{"file as root", ctx, file, nil, ErrInvalidRoot},
		{"empty name", ctx, root, []Option{WithDocumentName(" ")}, ErrInvalidOption},
		{"control character in name", ctx, root, []Option{WithDocumentName("a\nb")}, ErrInvalidOption},
		{"relative namespace", ctx, root, []Option{WithNamespace("spdx/doc")}, ErrInvalidOption},
		{"namespace with fragment", ctx, root, []Option{WithNamespace("https://x.example/doc#1")}, ErrInvalidOption},
		{"zero time", ctx, root, []Option{WithCreated(time.Time{})}, ErrInvalidOption},
		{"time before epoch", ctx, root, []Option{WithCreated(time.Unix(-1, 0))}, ErrInvalidOption},
		{"zero parallelism", ctx, root, []Option{WithParallelism(0)}, ErrInvalidOption},
		{"no catalogers", ctx, root, []Option{WithCatalogers()}, ErrInvalidOption},
		{"two catalogers in one name", ctx, root, []Option{WithCatalogers("a,b")}, ErrInvalidOption},
		{"unknown cataloger", ctx, root, []Option{WithCatalogers("no-such-cataloger")}, ErrCatalog},
		{"cancelled", cancelled, root, nil, context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Generate(c.ctx, c.root, c.opts...)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if msg := err.Error(); msg != strings.ToLower(msg[:1])+msg[1:] {
				t.Errorf("error %q starts with a capital", msg)
			}
		})
	}
}

// TestSyftVersion keeps SyftVersion equal to the syft version go.mod requires.
func TestSyftVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("\tgithub.com/anchore/syft "+SyftVersion)) {
		t.Errorf("go.mod does not require github.com/anchore/syft %s: update SyftVersion", SyftVersion)
	}
}
