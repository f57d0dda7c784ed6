"""What every wing uses: the prompt host, choice dialog, row tables, CSV export."""
