"""simulate page (placeholder)."""
import streamlit as st

st.title("Simulate")
st.info("Not built yet.")
