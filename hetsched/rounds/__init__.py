"""Stage 5, round rules: Gavel's micro-task rounds (`tasks`) and the ideal mechanism's fluid rounds (`ideal`).
Whole-round stages (Synergy's, the elastic systems') are their own round rules, in their decide folders."""
