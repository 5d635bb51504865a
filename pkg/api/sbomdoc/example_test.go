package sbomdoc_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/sbomdoc"
)

func ExampleDecode() {
	spdx := `{"spdxVersion":"SPDX-2.3","SPDXID":"SPDXRef-DOCUMENT","name":"rootfs",
	  "packages":[
	    {"SPDXID":"SPDXRef-DocumentRoot-Directory-rootfs","name":"rootfs"},
	    {"SPDXID":"SPDXRef-Package-deb-zlib1g","name":"zlib1g","versionInfo":"1:1.2.13.dfsg-1",
	     "externalRefs":[{"referenceCategory":"PACKAGE-MANAGER","referenceType":"purl","referenceLocator":"pkg:deb/debian/zlib1g@1%3A1.2.13.dfsg-1?arch=amd64"}]},
	    {"SPDXID":"SPDXRef-Package-npm-left-pad","name":"left-pad","versionInfo":"1.3.0",
	     "externalRefs":[{"referenceCategory":"PACKAGE-MANAGER","referenceType":"purl","referenceLocator":"pkg:npm/left-pad@1.3.0"}]}],
	  "relationships":[{"spdxElementId":"SPDXRef-DOCUMENT","relatedSpdxElement":"SPDXRef-DocumentRoot-Directory-rootfs","relationshipType":"DESCRIBES"}]}`
	pkgs, err := sbomdoc.Decode([]byte(spdx))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range pkgs {
		fmt.Println(p.Type, p.Name+"@"+p.Version)
	}
	_, err = sbomdoc.Decode([]byte(`{"spdxVersion":"SPDX-9.9"}`))
	fmt.Println(err)
	// Output:
	// npm left-pad@1.3.0
	// deb zlib1g@1:1.2.13.dfsg-1
	// sbomdoc: not a readable SPDX or CycloneDX JSON document: SPDX version "SPDX-9.9"
}
