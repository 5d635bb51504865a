// Package runnermeta is what a runner image says about itself in its
// config labels: the runner binary's sha256 (LabelSHA256), which the
// identity proof compares with the running executable, and the runner
// protocol it speaks (LabelProtocol). Release tooling reads them to refuse a
// runner pin that is not a runner image; the execution plane writes them
// (sandbox.RunnerImage) and reads them back.
//
// It is a contract package: constants only, no imports, so that both sides
// name the labels once without either importing the other. It does not build
// or unpack runner images: pkg/execution/sandbox does.
package runnermeta
