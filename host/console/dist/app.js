// Placeholder until host/console/web builds the page (make console).
document.getElementById("app").textContent = "dsh console: this build has no page (run make console)";
