// Package scan scrubs a workspace rootfs and scans it for secrets and unsafe
// files before the template build freezes it into an image: steps (4) and
// (5) of the template recipe. A finding refuses the freeze; Report.Err says
// where (path:line: rule) and never what: no part of a secret value reaches a
// Finding, the report's JSON or an error, only the kind of value and its
// length.
//
// Both functions work on a directory (an unpacked rootfs) through an os.Root:
// nothing outside it is opened, symlinks are never followed, and a FIFO or
// device is never read. They are one package because they share that
// confinement and the list of credential files one removes and the other
// double-checks; Scrub changes the tree, Scan only reads it.
//
// It is not a general secret scanner for source repositories, a malware or
// CVE scanner (the SBOM covers packages), or a policy engine: what to allow is
// the caller's Allow list, recorded in the report.
//
// Redact applies the content rules to text that leaves Slipway (a run's
// output delivered to a product) and replaces each value Scan would refuse
// with "[REDACTED rule]"; it is stricter than Scan where Scan needs a
// file's name (redact.go says how), and a redacted text scans clean.
//
// # Scrub
//
// Scrub(root, extra, keep) removes, in every home (/root and /home/*):
//
//	shell-history       .bash_history .zsh_history .ash_history .sh_history .python_history
//	                    .node_repl_history .lesshst .viminfo .mysql_history .psql_history
//	netrc               .netrc
//	git-credentials     .git-credentials
//	docker-config       .docker/config.json .config/containers/auth.json
//	aws-credentials     .aws/credentials .aws/config
//	gcloud-credentials  .config/gcloud/{credentials.db,access_tokens.db,
//	                    application_default_credentials.json,legacy_credentials/}
//	azure-credentials   .azure/{accessTokens.json,msal_token_cache.*,service_principal_entries.*}
//	kube-config         .kube/config
//	gh-credentials      .config/gh/hosts.yml
//	npm-token           .npmrc, only when it holds an _authToken, _auth or _password with a
//	                    literal value (a ${NPM_TOKEN} reference is no secret; Scan still
//	                    reads every .npmrc)
//	ssh-private-key     .ssh/id_* except *.pub
//
// and in the system:
//
//	ssh-host-key        /etc/ssh/ssh_host_* (both halves; the refresh phase makes new ones)
//	machine-id          /etc/machine-id, /var/lib/dbus/machine-id: emptied, file and mode kept
//	random-seed         /var/lib/systemd/random-seed, /var/lib/urandom/random-seed
//	apt-lists           /var/lib/apt/lists/* except lock and partial
//	apt-cache           /var/cache/apt/*.bin, /var/cache/apt/archives/*.deb and partial/*
//	tmp                 /tmp/* and /var/tmp/* (the directories and their modes stay)
//	log-rotated         /var/log/**: rotated, compressed and journal files (*.1, *.old,
//	                    *.gz, *.xz, *.bz2, *.zst, *.lz4, *-YYYYMMDD, *.journal) are removed
//	log-truncated       /var/log/**: every other non-empty regular file is emptied, keeping
//	                    the file and its mode (daemons expect them; their content is build
//	                    history and host detail, and would change the image on every build)
//	extra               the caller's absolute paths or globs (a final ** matches a subtree)
//
// Nothing at or below a keep path (the template's allowed caches) is removed,
// and a directory holding one is emptied around it. A matching symlink is
// removed itself, never its target; a pattern that leads through a symlinked
// directory is reported as skipped. The report lists each path removed,
// emptied, kept or skipped, sorted, with its rule. A second Scrub changes
// nothing.
//
// # Scan
//
// Scan walks the whole tree. The rule ids are the Rule constants:
//
//	private-key           PEM (RSA, EC, DSA, OPENSSH, ENCRYPTED, PKCS#8) or PGP private key
//	                      block followed by key material
//	aws-access-key-id     AKIA/ASIA + 16 (ids ending in EXAMPLE, AWS's sample, are ignored)
//	aws-secret-access-key aws_secret_access_key (any spelling) = 40-character secret
//	gcp-service-account   JSON with "type": "service_account" and a "private_key"
//	github-token          ghp_ gho_ ghu_ ghs_ ghr_ + 36, github_pat_ fine-grained tokens
//	slack-token           xoxa- xoxb- xoxp- xoxr- tokens
//	slack-webhook         https://hooks.slack.com/services|workflows|triggers/…
//	docker-config-auth    non-empty auth, identitytoken, registrytoken or password under
//	                      auths in any config.json, auth.json or .dockercfg
//	url-password          scheme://user:password@host, password not a placeholder
//	high-entropy-secret   secret-named key in a well-known config file with a value of
//	                      16+ chars and 3.5+ bits/char (MinSecretLength, MinEntropy)
//	setuid-setgid         setuid/setgid regular file outside the allow-list
//	world-writable-dir    world-writable directory without the sticky bit
//	ssh-host-key          leftover /etc/ssh/ssh_host_*_key
//	machine-id            non-empty /etc/machine-id or /var/lib/dbus/machine-id
//
// Decisions, to keep the refusals worth reading:
//
//   - Placeholders are not secrets: ${VAR}, $VAR, {{ .x }}, {x}, %(x)s, <x>, one
//     character repeated, the words password, passwd, pass, pwd, secret,
//     changeme, redacted, example, token, foo, bar, and Redact's own
//     "[REDACTED rule]" markers; nor are hosts under example.com/.org/.net,
//     .example, .test and .invalid.
//   - The entropy rule reads only .env, .env.*, *.env, *.ini, *.cfg, *.conf,
//     *.cnf, *.toml, *.yaml, *.yml, *.properties, .npmrc, .pypirc, .pgpass,
//     .my.cnf and files named credentials. A key suggests a secret when it
//     contains password, passwd, secret, token, api_key/apikey, access_key or
//     private_key, or has a word auth or pass (_auth, db_pass; not author). The
//     value must hold two of lower case, upper case and digits and must not be
//     a path, a URL (url-password covers those), an ENC[…] envelope or hold
//     EXAMPLE. So "password: changeme" is not flagged (8 chars, 2.8 bits/char);
//     a random 16-character token (about 3.7 bits/char) is.
//   - A private key header alone (a parser's string constant, a MIME table) is
//     not a key: material must follow it, on the same line after an escaped
//     \n or on the next non-blank line.
//   - Test fixtures are findings too: toolchains and Python packages ship real
//     test keys and passwords (Go's crypto testdata, urllib3's dummy certs).
//     Allow them by path, e.g. private-key:/usr/local/go/src/**.
//
// Bounds: the content rules skip files over the size limit (WithMaxFileSize,
// default 10 MiB) and binary files (a NUL in the first 8 KiB), counting both
// in the report; name and mode rules still apply to them. A file is read
// through a 64 KiB buffer whatever its size; a longer line is scanned in
// overlapping pieces. Files are read by WithConcurrency workers (default
// GOMAXPROCS, at most 8) while one goroutine walks. An unreadable directory or
// file is an error: a scan that could not look everywhere does not pass.
//
// Allow exempts findings by rule (or *) and path glob (** for subtrees);
// exempted findings move to Report.Allowed with the Allow that matched, so the
// output records them. The setuid allow-list is DefaultSetuidAllowList, which
// WithSetuidAllowList replaces and WithExtraSetuidAllowed extends.
package scan
