// Package spelling measures how far one word is from another, so that a
// mistyped command, sub-verb or field can be answered with the name that
// was probably meant. It is a foundation with the standard library only; it
// does not decide what counts as close enough (its callers do).
package spelling
