//! Mapping between Diameter CCR/CCA messages and the engine types.
