package ref_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/ref"
)

const dgst = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in                                string
		registry, repository, tag, digest string
		written, canonical                string
	}{
		{in: "nginx", registry: "index.docker.io", repository: "library/nginx", written: "nginx", canonical: "index.docker.io/library/nginx:latest"},
		{in: "nginx:1.25", registry: "index.docker.io", repository: "library/nginx", tag: "1.25", written: "nginx", canonical: "index.docker.io/library/nginx:1.25"},
		{in: "docker.io/library/nginx:1.25", registry: "index.docker.io", repository: "library/nginx", tag: "1.25", written: "docker.io/library/nginx", canonical: "index.docker.io/library/nginx:1.25"},
		{in: "bitnami/redis:7", registry: "index.docker.io", repository: "bitnami/redis", tag: "7", written: "bitnami/redis", canonical: "index.docker.io/bitnami/redis:7"},
		{in: "127.0.0.1:5000/app", registry: "127.0.0.1:5000", repository: "app", written: "127.0.0.1:5000/app", canonical: "127.0.0.1:5000/app:latest"},
		{in: "localhost:5000/team/app:v1", registry: "localhost:5000", repository: "team/app", tag: "v1", written: "localhost:5000/team/app", canonical: "localhost:5000/team/app:v1"},
		{in: "ghcr.io/o/r@" + dgst, registry: "ghcr.io", repository: "o/r", digest: dgst, written: "ghcr.io/o/r", canonical: "ghcr.io/o/r@" + dgst},
		{in: "ghcr.io/o/r:v2@" + dgst, registry: "ghcr.io", repository: "o/r", tag: "v2", digest: dgst, written: "ghcr.io/o/r", canonical: "ghcr.io/o/r:v2@" + dgst},
		{in: "registry:5000/r:5000", registry: "registry:5000", repository: "r", tag: "5000", written: "registry:5000/r", canonical: "registry:5000/r:5000"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			r, err := ref.Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{r.Registry(), r.Repository(), r.Tag(), r.Digest(), r.Written(), r.Canonical(), r.String()}
			want := []string{tc.registry, tc.repository, tc.tag, tc.digest, tc.written, tc.canonical, tc.in}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("field %d = %q, want %q", i, got[i], want[i])
				}
			}
			if r.IsPinned() != (tc.digest != "") {
				t.Errorf("IsPinned = %v", r.IsPinned())
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{
		"", "nginx ", " nginx", "ngi nx", "NGINX", "nginx:", "nginx@sha256:abc", "nginx@md5:" + strings.Repeat("a", 32),
		"nginx:1@" + dgst + "@" + dgst, "nginx:bad:tag", "-nginx", strings.Repeat("a", ref.MaxLength+1),
	} {
		if _, err := ref.Parse(in); !errors.Is(err, ref.ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestTarget(t *testing.T) {
	r, _ := ref.Parse("nginx")
	if got := r.Target().String(); got != "index.docker.io/library/nginx:latest" {
		t.Errorf("Target = %s", got)
	}
	r, _ = ref.Parse("nginx:1@" + dgst)
	if got := r.Target().String(); got != "index.docker.io/library/nginx@"+dgst {
		t.Errorf("Target of tag+digest asks by digest, got %s", got)
	}
	if got := r.WithoutTag().String(); got != "nginx@"+dgst {
		t.Errorf("WithoutTag = %s", got)
	}
	if got := r.WithDigest("").String(); got != "nginx:1" {
		t.Errorf("WithDigest(\"\") = %s", got)
	}
}

func TestPin(t *testing.T) {
	r, _ := ref.Parse("127.0.0.1:5000/app:v1")
	p := ref.PinOf(r, dgst, ref.Origin{Source: ref.SourceRegistry})
	if p.String() != "127.0.0.1:5000/app:v1@"+dgst || p.DigestRef() != "127.0.0.1:5000/app@"+dgst {
		t.Fatalf("pin renders as %s / %s", p, p.DigestRef())
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	p.Digest = "sha256:abc"
	if err := p.Validate(); !errors.Is(err, ref.ErrInvalid) {
		t.Fatalf("short digest accepted: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"nginx", "nginx:1.25", "127.0.0.1:5000/a/b:c@" + dgst, "a@" + dgst, "x:y:z", "localhost/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ref.Parse(s)
		if err != nil {
			if !errors.Is(err, ref.ErrInvalid) {
				t.Fatalf("error outside the family: %v", err)
			}
			return
		}
		// What parses must print back as written and parse again to the same thing.
		if r.String() != s {
			t.Fatalf("String() = %q, want %q", r.String(), s)
		}
		again, err := ref.Parse(r.Canonical())
		if err != nil {
			t.Fatalf("canonical %q does not parse: %v", r.Canonical(), err)
		}
		if again.Canonical() != r.Canonical() {
			t.Fatalf("canonical not stable: %q then %q", r.Canonical(), again.Canonical())
		}
	})
}
