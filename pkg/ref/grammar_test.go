package ref

import (
	"math/rand/v2"
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
