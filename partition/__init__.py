"""partita.partition (see ARCHITECTURE.md); filled by later issues."""
