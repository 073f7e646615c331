//! Support traits for the generated L1 types.
