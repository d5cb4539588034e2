"""Report sections: one module per kind of run, each rendering a summary."""
