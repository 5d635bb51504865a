// Package progress shows long work on a terminal: one status line redrawn
// in place (or, when asked for outside a terminal, a line per change), and
// the rule that decides when to show it at all (--progress auto: a
// terminal, no structured output, not CI). Library packages never draw:
// they report through callbacks of their own, and the command line hands
// those reports to a Printer.
package progress
