"""partita.patterns (see ARCHITECTURE.md); filled by later issues."""
