"""Qt adapters over the fleet model: item models, the frame pump, Qt logging."""
