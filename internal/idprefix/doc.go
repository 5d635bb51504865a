// Package idprefix finds the one id a typed prefix names among the ids
// that exist (generations g-, rollouts ro-, runs r-, jobs j-), as git does
// for abbreviated commits. It is not a store: callers list the ids.
package idprefix
