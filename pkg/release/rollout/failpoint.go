package rollout

// failpointHook, when set (binaries built with -tags failpoints), is
// called at every transition: "before-commit:<step>" inside the commit's
// edit, "after-commit:<step>" once it landed.
var failpointHook func(name string)
