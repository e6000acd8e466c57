"""Scene model: parameter tables, validated specs, Model/State."""
