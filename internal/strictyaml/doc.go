// Package strictyaml decodes Slipway's YAML documents (template specs,
// verification policies, generations) strictly, and finds the line of any
// field so that a validation error can name file:line.
//
// Decode refuses unknown fields, a second document in the same stream, and
// documents over a size limit the caller sets; its errors are *Error values
// carrying the line. Doc.Line maps a dotted field path such as
// "spec.rules[1].attestations[0].type" to its line, or to the line of the
// nearest ancestor that exists when the field is absent.
//
// It sits on kyaml's yaml.v3 and does not validate meaning: each document
// type does that itself and uses Line for its messages.
package strictyaml
