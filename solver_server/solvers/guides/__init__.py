"""Guide hair: strand layout helpers, guide selection (k-means, eq. 4.1) and child interpolation (eq. 4.2)."""
