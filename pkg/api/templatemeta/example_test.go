package templatemeta_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
)

func ExampleParseTests() {
	labels := map[string]string{
		templatemeta.LabelTests: `[{"name":"shell","run":["sh","-c","true"]},{"name":"python","run":["python3","-V"],"timeout":"1m30s"}]`,
	}
	tests, err := templatemeta.ParseTests(labels[templatemeta.LabelTests])
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range tests {
		fmt.Println(t.Name, t.Run, t.Timeout)
	}
	_, err = templatemeta.ParseTests(`[{"name":"x","timeout":"soon"}]`)
	fmt.Println(err)
	// Output:
	// shell [sh -c true] 0s
	// python [python3 -V] 1m30s
	// templatemeta: invalid tests label: "soon" is not a duration like 90s or 10m
}
