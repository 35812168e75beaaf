"""host layer (see DESIGN.md data flow)."""
