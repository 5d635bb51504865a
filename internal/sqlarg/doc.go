// Package sqlarg writes a query's ? placeholders as PostgreSQL's $1, $2,
// ..., so that a store that runs on SQLite and on PostgreSQL keeps one text
// of each query. It is not a query builder: it knows no quoting, and a ?
// inside a string literal would be rewritten too (the stores' queries have
// none).
package sqlarg
