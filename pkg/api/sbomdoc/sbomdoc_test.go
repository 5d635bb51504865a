package sbomdoc

import (
	"errors"
	"fmt"
	"testing"
)

// TestDecodeCycloneDX: components, nested ones too, without the operating
// system and files; sorted, without duplicates.
func TestDecodeCycloneDX(t *testing.T) {
	doc := `{"bomFormat":"CycloneDX","specVersion":"1.6","metadata":{"component":{"type":"file","name":"rootfs"}},
	  "components":[
	    {"type":"operating-system","name":"debian","version":"12"},
	    {"type":"library","name":"openssl","version":"3.0.7-1","purl":"pkg:deb/debian/openssl@3.0.7-1"},
	    {"type":"library","name":"app","version":"v1.0.0","purl":"pkg:golang/example.com/app@v1.0.0",
	     "components":[{"type":"library","name":"requests","version":"2.31.0","purl":"pkg:pypi/requests@2.31.0"}]},
	    {"type":"library","name":"openssl","version":"3.0.7-1","purl":"pkg:deb/debian/openssl@3.0.7-1"},
	    {"type":"file","name":"/etc/passwd"}]}`
	got, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := "[{app v1.0.0 go-module pkg:golang/example.com/app@v1.0.0} {openssl 3.0.7-1 deb pkg:deb/debian/openssl@3.0.7-1} {requests 2.31.0 python pkg:pypi/requests@2.31.0}]"
	if fmt.Sprint(got) != want {
		t.Fatalf("got  %v\nwant %s", got, want)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, bad := range []string{``, `{}`, `[]`, `{"spdxVersion":"SPDX-9.9"}`, `not json`, `{"bomFormat":"CycloneDX","components":{}}`,
		`{"spdxVersion":"SPDX-2.3","packages":"x"}`} {
		if _, err := Decode([]byte(bad)); !errors.Is(err, ErrDecode) {
			t.Errorf("Decode(%q): %v, want ErrDecode", bad, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"spdxVersion":"SPDX-2.3","packages":[{"SPDXID":"a","name":"x","versionInfo":"1"}]}`))
	f.Add([]byte(`{"bomFormat":"CycloneDX","components":[{"type":"library","name":"x","version":"1","purl":"pkg:npm/x@1"}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		ps, err := Decode(doc)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v does not wrap ErrDecode", err)
			}
			return
		}
		for i := 1; i < len(ps); i++ {
			if Compare(ps[i-1], ps[i]) >= 0 {
				t.Fatalf("not sorted or duplicated: %v", ps)
			}
		}
	})
}
