"""compare page (placeholder)."""
import streamlit as st

st.title("Compare")
st.info("Not built yet.")
