package ref

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"testing"
)

// TestGrammarMatchesPatterns checks isComponent and isTag against the
// regular expressions they replace, on listed and on random strings.
func TestGrammarMatchesPatterns(t *testing.T) {
	component, tag := regexp.MustCompile(componentPattern), regexp.MustCompile(tagPattern)
	cases := []string{"", "a", "A", "a.b", "a..b", "a_b", "a__b", "a___b", "a-b", "a--b", "a-", "-a", ".a", "a.", "_a", "a_",
		"a._b", "a-.b", "ab12", "v1.2.3", "_v", "V1", "a/b", "a b", "é", "latest", "sha256:x"}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab09AZ._-/:@é"
	for range 100_000 {
		b := make([]byte, rng.IntN(8))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	long := make([]byte, 129)
	for i := range long {
		long[i] = 'a'
	}
	cases = append(cases, string(long), string(long[:128]), string(long[:127]))
	for _, c := range cases {
		if got, want := isComponent(c), component.MatchString(c); got != want {
			t.Errorf("isComponent(%q) = %v, the pattern says %v", c, got, want)
		}
		if got, want := isTag(c), tag.MatchString(c); got != want {
			t.Errorf("isTag(%q) = %v, the pattern says %v", c, got, want)
		}
	}
}

// TestParserIsParse: a Parser gives Parse's result and error for every
// reference, parsed once or again, of repositories it has seen or not.
func TestParserIsParse(t *testing.T) {
	in := []string{"", " a", "a b", "alpine", "alpine:3.20", "alpine:", "Alpine:1", "docker.io/library/alpine:latest",
		"localhost:5000/a/b:v1", "localhost:5000/a/b", "registry.example.com/team/app:v1.2",
		"registry.example.com/team/app:-bad", "registry.example.com/Team/app:v1", "registry.example.com:x/app:v1",
		"registry.example.com/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"registry.example.com/team/app:v1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"app@sha256:short", "a@b@c", "a//b:1", "a/../b:1", "ko://x", "a:1:2", "[::1]:5000/app:v1", "http://a/b:1"}
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = "ab09Z._-/:@"
	for range 20_000 {
		b := make([]byte, 1+rng.IntN(14))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		in = append(in, string(b))
	}
	var p Parser
	for pass := range 2 {
		for _, s := range in {
			want, werr := Parse(s)
			got, gerr := p.Parse(s)
			if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("pass %d, %q: Parser %+v, %v; Parse %+v, %v", pass, s, got, gerr, want, werr)
			}
		}
	}
}
