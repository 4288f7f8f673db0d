"""sweeps page (placeholder)."""
import streamlit as st

st.title("Sweeps")
st.info("Not built yet.")
