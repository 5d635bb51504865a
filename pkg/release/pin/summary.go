package pin

// Summary says what Find read and left alone, and what the references it
// found are, so that a report claims no more than was checked.
type Summary struct {
	// Files and Documents are the YAML files read and their documents.
	Files     int `json:"files"`
	Documents int `json:"documents"`
	// References counts the sites checked: every site but the excluded
	// ones and the kustomize placeholders. Found splits it by the rule that
	// found each; Pinned, Unpinned and Placeholders by what it is.
	References   int             `json:"references"`
	Found        map[FoundBy]int `json:"found"`
	Pinned       int             `json:"pinned"`
	Unpinned     int             `json:"unpinned"`
	Placeholders int             `json:"placeholders"`
	// Excluded are the sites a PinConfig exclusion selects; KustomizePlaceholders
	// those a kustomization's images entry renames (the entry is checked).
	Excluded              int `json:"excluded"`
	KustomizePlaceholders int `json:"kustomizePlaceholders"`
	// Skipped counts Tree.Skipped by kind; NotYAML the files not read for
	// their names.
	Skipped map[SkipKind]int `json:"skipped"`
	NotYAML int              `json:"notYAML"`
}

// Summary counts the tree's files, documents, sites and skipped paths.
func (t *Tree) Summary() Summary {
	s := Summary{Files: len(t.Files), Found: map[FoundBy]int{}, Skipped: map[SkipKind]int{}}
	refs := newRefCache()
	for _, f := range t.Files {
		s.Documents += f.Documents
		for i, site := range f.sites {
			switch {
			case site.ExcludedBy != "":
				s.Excluded++
				continue
			case site.RenamedBy != "":
				s.KustomizePlaceholders++
				continue
			}
			s.References++
			s.Found[site.FoundBy]++
			switch {
			case site.Placeholder != "":
				s.Placeholders++
			case lintSite(f, i, refs) == "":
				s.Pinned++
			default:
				s.Unpinned++
			}
		}
	}
	for _, sk := range t.Skipped {
		s.Skipped[sk.Kind]++
	}
	for _, n := range t.NotYAML {
		s.NotYAML += n
	}
	return s
}
