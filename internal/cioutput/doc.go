// Package cioutput writes a step's outputs in CI systems' own forms: one
// neutral Step (named outputs, a summary, findings at file:line) becomes
//
//   - GitHub Actions: name=value lines (the heredoc form with a random
//     delimiter for a value with a line break) appended to $GITHUB_OUTPUT, a
//     Markdown summary appended to $GITHUB_STEP_SUMMARY, and each finding as an
//     ::error file=F,line=L,col=C:: workflow command on stdout, escaped as
//     GitHub's toolkit escapes them;
//   - Tekton: one file per result in the step's results directory (what
//     $(results.NAME.path) names), the name upper-cased with - as _
//     (template-id is TEMPLATE_ID), plus IMAGE_URL and IMAGE_DIGEST for a step
//     that published an image, the type hint Tekton Chains signs;
//   - GitLab CI: KEY=value lines appended to a dotenv file for
//     artifacts:reports:dotenv (no line breaks in a value, no empty lines,
//     under 5 KB, as GitLab requires), and findings at file:line added to a
//     Code Quality report (artifacts:reports:codequality) with a fingerprint
//     that does not change when lines move.
//
// It formats and writes, nothing else: which values a command publishes is
// the command's choice (never a secret), and it knows nothing of what the
// values mean. JUnit reports for GitLab are not here.
package cioutput
