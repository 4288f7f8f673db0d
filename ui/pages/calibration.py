"""calibration page (placeholder)."""
import streamlit as st

st.title("Calibration")
st.info("Not built yet.")
