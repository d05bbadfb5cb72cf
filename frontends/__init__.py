"""partita.frontends (see ARCHITECTURE.md); filled by later issues."""
