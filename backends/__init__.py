"""partita.backends (see ARCHITECTURE.md); filled by later issues."""
