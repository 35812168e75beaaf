"""sweep layer (see DESIGN.md data flow)."""
